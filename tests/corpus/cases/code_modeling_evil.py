import os

class EvilModel:
    def __init__(self):
        os.system('echo pwned')
