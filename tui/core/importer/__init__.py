"""`rlconsole import`: an existing VeRL launch script (and hostfile) becomes a profile.

The script is never run. `shellscan` splits it into commands as bash's parser would,
`shellexpand` expands words as bash would (command substitutions become placeholders),
`interp` walks the commands keeping the variables, `launch` finds and takes apart the
training launch, `build` decides every profile value and what to report, and `writer`
writes the commented YAML.
"""

from tui.core.importer.build import Finding, ImportResult, import_script
from tui.core.importer.writer import render_profile, summary

__all__ = ["Finding", "ImportResult", "import_script", "render_profile", "summary"]
