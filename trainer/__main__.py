import gc
import sys

from trainer import environment, pod

# Before TensorFlow starts (trainer.cli imports it): Keras 2, and a TPU pod's client must not claim this host's chips.
environment.prepare()
pod.prepare_from_argv(sys.argv[1:])

from trainer.cli import main  # noqa: E402

code = main()
# As pipeline/__main__.py: spare the exit's garbage collections over TensorFlow's objects.
gc.freeze()
sys.exit(code)
