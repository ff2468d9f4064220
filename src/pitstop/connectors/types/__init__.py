"""One module per mapping type; :mod:`pitstop.connectors.registry` lists them."""
