"""Foundations every layer uses: byte sizes and rates (:mod:`.units`), progress messages
(:mod:`.progress`), memory guards (:mod:`.resources`), standard JSON files
(:mod:`.jsonfile`) and "did you mean" hints (:mod:`.names`)."""
