import Futures
import FuturesURLSession

print(FutureURLSession.self)
