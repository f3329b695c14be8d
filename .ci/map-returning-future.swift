// Compiled by .ci/run, which expects the compiler to steer this `map` to `flatMap`: a closure that
// returns a Future makes a Future<Future<T>>, which newcomers rarely mean.
import Futures

let nested = Future(value: 1).map { Future(value: $0 + 1) }
let onMain = Future(value: 1).map(on: .main) { Future(value: $0 + 1) }
print(nested, onMain)
