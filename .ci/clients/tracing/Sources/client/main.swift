import Futures
import FuturesTracing

FuturesTracing.bootstrap()
print(Future.withSpan("answer") { _ in Future(value: 42) }.outcome ?? .cancelled)
