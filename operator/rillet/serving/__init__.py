"""`rillet table serve`, the command that runs a Table server (`commands`).

The server itself is `tables.serving`. Beside `handlers` in the layers, independent of it:
imported only by `cli`; it imports `tables`, the pyspark-free part of `runtime`, and `api`.
"""
