"""The File connector: a folder of JSON, CSV or Parquet files as a source (:mod:`.source`) and
as a sink (:mod:`.sink`), and its declaration (:mod:`.connector`)."""
