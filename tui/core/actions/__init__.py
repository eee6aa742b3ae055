"""The actions behind the console's keys: containers, model, convert, setup-ray, submit,
stop. Each is an async generator of `ActionEvent`s so the TUI and the CLI render the same
progress; none imports Textual."""
