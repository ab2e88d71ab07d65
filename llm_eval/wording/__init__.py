"""Every sentence a reader sees is built here: gates and slices (`gates`), whole-report
lines (`report_lines`), plurals and lists (`english`)."""
