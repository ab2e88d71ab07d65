"""One module per subcommand: each loads its inputs, calls the library, returns a result."""
