"""placeholder"""
def register(sub, parents):
    pass
