print("futures-demo")
