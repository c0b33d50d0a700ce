"""The scenario space's vocabulary (``cells``: dimensions, cells, reasons) and its
scenario-wide settings (``settings``), each written once, below the strategies that draw
them, the aims that land in them and the explorer that counts them."""
