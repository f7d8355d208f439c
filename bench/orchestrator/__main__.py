import sys

from bench.orchestrator.run import main

sys.exit(main())
