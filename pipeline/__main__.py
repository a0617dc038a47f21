import gc
import sys
import warnings

from trainer import environment

# Before anything imports TensorFlow: what it reads at its import (Keras 2), and the repo on the children's path.
environment.prepare()

from pipeline import console  # noqa: E402

# Before TensorFlow too: its C++ writes to descriptor 2 from the import on; the person sees only what we print.
console.quiet()
# google-api-core warns about Python 3.10 on import; TFX 1.16 needs 3.10 (README).
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.api_core\..*")

from pipeline.cli import main  # noqa: E402

code = main()
# The run is over; the interpreter's last garbage collections would walk TensorFlow's and
# TFX's millions of objects again (about 2 s). Exit handlers and stream flushing still run.
gc.freeze()
sys.exit(code)
