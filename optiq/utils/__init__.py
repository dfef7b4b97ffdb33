"""Foundations every layer uses: byte sizes and rates (:mod:`.units`), progress messages
(:mod:`.progress`), memory guards (:mod:`.resources`) and standard JSON files
(:mod:`.jsonfile`)."""
