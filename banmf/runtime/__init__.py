"""What a run needs around the mathematics: the thread budget (:mod:`~banmf.runtime.threads`),
Ctrl-C and SIGTERM (:mod:`~banmf.runtime.signals`), progress records
(:mod:`~banmf.runtime.progress`), the memory budget (:mod:`~banmf.runtime.memory`), atomic
files (:mod:`~banmf.runtime.files`), work side by side (:mod:`~banmf.runtime.runner`) and
compiling ahead (:mod:`~banmf.runtime.warmup`)."""
