import Futures

let answer = Future(value: 21).map(on: .immediate) { $0 * 2 }
print("answer: \(answer.outcome?.value ?? 0)")
