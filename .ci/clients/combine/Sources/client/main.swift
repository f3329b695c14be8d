import Futures
import FuturesCombine

print(Future(value: 1).publisher)
