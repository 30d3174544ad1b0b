"""The stability run kind on the web side (its declaration: workers/kinds/stability/)."""
