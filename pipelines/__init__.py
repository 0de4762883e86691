"""Ray job entry points (builders, evaluation) and the LLM stage machinery they share.

Their processes allocate Arrow memory from the system allocator: Arrow's default (mimalloc) keeps
the pages a read or a write freed, so a driver that reads a corpus one day at a time grew by about
1 KB per article it had read (``bench.scale``), where the system allocator hands them back.
"""

import pyarrow as _pa

_pa.set_memory_pool(_pa.system_memory_pool())
