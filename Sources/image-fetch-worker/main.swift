import ImageFetchWorker
print("hi")
