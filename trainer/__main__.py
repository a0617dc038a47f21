import gc
import sys

from trainer.cli import main

code = main()
# As pipeline/__main__.py: spare the exit's garbage collections over TensorFlow's objects.
gc.freeze()
sys.exit(code)
