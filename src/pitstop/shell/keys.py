"""Key bindings: Enter submits only a complete statement (or a backslash command); otherwise it
starts a new line. Alt-Enter always starts a new line; F4 switches between emacs and vi keys."""

from __future__ import annotations

from prompt_toolkit.enums import EditingMode
from prompt_toolkit.filters import completion_is_selected, emacs_insert_mode, vi_insert_mode
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from pitstop.sql.parser import is_complete

EXIT_WORDS = ("quit", "exit", "\\q")


def ready_to_submit(text: str) -> bool:
    """Whether Enter runs ``text``: a complete statement, a backslash command, a quit word, or
    nothing at all."""
    stripped = text.strip()
    if not stripped or stripped.startswith("\\"):
        return True
    if stripped.rstrip(";").strip().lower() in EXIT_WORDS:
        return True
    return is_complete(text)


def key_bindings() -> KeyBindings:
    kb = KeyBindings()
    inserting = emacs_insert_mode | vi_insert_mode

    @kb.add("enter", filter=completion_is_selected)
    def _accept_completion(event: KeyPressEvent) -> None:
        event.current_buffer.complete_state = None

    @kb.add("enter", filter=inserting & ~completion_is_selected)
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        at_end = not buffer.document.text_after_cursor.strip()
        if at_end and ready_to_submit(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.newline()

    @kb.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.newline()

    @kb.add("f4")
    def _switch_mode(event: KeyPressEvent) -> None:
        app = event.app
        app.editing_mode = EditingMode.EMACS if app.editing_mode == EditingMode.VI else EditingMode.VI

    return kb
