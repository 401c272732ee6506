"""The console's pages, one module per area; ``common`` holds rendering, errors and the action wrapper."""
