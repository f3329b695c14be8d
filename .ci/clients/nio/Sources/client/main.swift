import Futures
import FuturesNIO

print(EventLoopExecutor.self)
