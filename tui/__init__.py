"""rlconsole: a console that brings up and watches a VeRL GRPO run on a Ray cluster."""

import warnings

# asyncssh imports cryptography's DSA support at start, and cryptography >= 44 warns that DSA
# is deprecated: ten lines of CryptographyDeprecationWarning on every command's stderr that
# say nothing about the user's run (rlconsole never offers or accepts DSA keys itself).
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh\.")
