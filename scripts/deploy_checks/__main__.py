"""`python -m scripts.deploy_checks`: check the deployment files, print the summary table."""

from __future__ import annotations

import sys

from scripts.deploy_checks.report import main

sys.exit(main())
