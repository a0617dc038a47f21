import sys
import warnings

# google-api-core warns about Python 3.10 on import; TFX 1.16 needs 3.10 (README).
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.api_core\..*")

from pipeline.cli import main  # noqa: E402

sys.exit(main())
