"""Go's JSON scanner, copied iteratively: where the first value ends, or Go's syntax error.

Errors read as ``encoding/json``'s (``invalid character 'x' looking for beginning of value``,
``unexpected EOF``), since clients of the real server see those texts.
"""

from __future__ import annotations

from zephon_chaos.errors import InvalidInput

MAX_DEPTH = 10_000
_WHITESPACE = b" \t\r\n"
_ESCAPES = b'"\\/bfnrtu'
_HEX = b"0123456789abcdefABCDEF"
_DIGITS = b"0123456789"


class GoJSONError(InvalidInput, ValueError):
    """A body Go's decoder would refuse; ``str()`` is Go's message."""


def _quote_char(c: int) -> str:
    """Go's ``quoteChar``: how a byte is shown inside a syntax error."""
    if c == 0x27:
        return "'\\''"
    if c == 0x22:
        return "'\"'"
    named = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v", 0x5C: "\\\\"}
    if c in named:
        return f"'{named[c]}'"
    if c < 0x20 or c == 0x7F:
        return f"'\\x{c:02x}'"
    if 0x80 <= c <= 0xA0 or c == 0xAD:
        return f"'\\u{c:04x}'"
    return f"'{chr(c)}'"


def _syntax(c: int, context: str) -> GoJSONError:
    return GoJSONError(f"invalid character {_quote_char(c)} {context}")


class Scanner:
    """An iterative copy of Go's JSON scanner: finds the end of the first value or fails."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.i = 0
        self.max_depth = 0

    def _peek_nonspace(self) -> int | None:
        data, n = self.data, len(self.data)
        while self.i < n and data[self.i] in _WHITESPACE:
            self.i += 1
        return data[self.i] if self.i < n else None

    def _need(self) -> int:
        c = self._peek_nonspace()
        if c is None:
            raise GoJSONError("unexpected EOF")
        return c

    def scan(self) -> tuple[int, int]:
        """Return ``(start, end)`` of the first value; ``EOF`` when there is none."""
        if self._peek_nonspace() is None:
            raise GoJSONError("EOF")
        start = self.i
        # Each open container is "o" (object) or "a" (array); "k" marks an expected key.
        stack: list[str] = []
        expect_value = True
        while True:
            if expect_value:
                c = self._need()
                if c in (0x7B, 0x5B):  # { [
                    expect_value = not self._open(stack, c)
                    if not stack and not expect_value:
                        return start, self.i
                    continue
                self._scalar(c)
                expect_value = False
                if not stack:
                    return start, self.i
                continue
            # After a value inside a container: a comma (then an object's next key), or the
            # container's own closing bracket.
            c = self._need()
            obj = stack[-1] == "o"
            if c == 0x2C:  # ,
                self.i += 1
                if obj:
                    self._object_key(self._need())
                expect_value = True
                continue
            if c != (0x7D if obj else 0x5D):
                raise _syntax(c, "after object key:value pair" if obj else "after array element")
            self.i += 1
            stack.pop()
            if not stack:
                return start, self.i

    def _open(self, stack: list[str], c: int) -> bool:
        """Enter the object or array ``c`` opens, reading an object's first key; True when
        it closes at once (``{}``, ``[]``)."""
        obj = c == 0x7B
        self.i += 1
        stack.append("o" if obj else "a")
        self._check_depth(c, len(stack))
        first = self._need()
        if first == (0x7D if obj else 0x5D):
            self.i += 1
            stack.pop()
            return True
        if obj:
            self._object_key(first)
        return False

    def _check_depth(self, c: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _syntax(c, "exceeded max depth")
        self.max_depth = max(self.max_depth, depth)

    def _object_key(self, c: int) -> None:
        if c != 0x22:
            raise _syntax(c, "looking for beginning of object key string")
        self._string()
        c = self._need()
        if c != 0x3A:
            raise _syntax(c, "after object key")
        self.i += 1

    def _scalar(self, c: int) -> None:
        if c == 0x22:
            self._string()
        elif c == 0x2D or c in _DIGITS:
            self._number()
        elif c in (0x74, 0x66, 0x6E):
            self._literal({0x74: b"true", 0x66: b"false", 0x6E: b"null"}[c])
        else:
            raise _syntax(c, "looking for beginning of value")

    def _string(self) -> None:
        data, n = self.data, len(self.data)
        self.i += 1
        while self.i < n:
            c = data[self.i]
            if c == 0x22:
                self.i += 1
                return
            if c == 0x5C:
                self.i += 1
                if self.i >= n:
                    break
                e = data[self.i]
                if e not in _ESCAPES:
                    raise _syntax(e, "in string escape code")
                self.i += 1
                if e == 0x75:
                    for _ in range(4):
                        if self.i >= n:
                            raise GoJSONError("unexpected EOF")
                        if data[self.i] not in _HEX:
                            raise _syntax(data[self.i], "in \\u hexadecimal character escape")
                        self.i += 1
                continue
            if c < 0x20:
                raise _syntax(c, "in string literal")
            self.i += 1
        raise GoJSONError("unexpected EOF")

    def _digits(self) -> int:
        data, n, start = self.data, len(self.data), self.i
        while self.i < n and data[self.i] in _DIGITS:
            self.i += 1
        return self.i - start

    def _number(self) -> None:
        data, n = self.data, len(self.data)
        if data[self.i] == 0x2D:
            self.i += 1
            if self.i >= n:
                raise GoJSONError("unexpected EOF")
            if data[self.i] not in _DIGITS:
                raise _syntax(data[self.i], "in numeric literal")
        if data[self.i] == 0x30:
            self.i += 1
        else:
            self._digits()
        if self.i < n and data[self.i] == 0x2E:
            self.i += 1
            if self.i >= n:
                raise GoJSONError("unexpected EOF")
            if not self._digits():
                raise _syntax(data[self.i], "after decimal point in numeric literal")
        if self.i < n and data[self.i] in b"eE":
            self.i += 1
            if self.i < n and data[self.i] in b"+-":
                self.i += 1
            if self.i >= n:
                raise GoJSONError("unexpected EOF")
            if not self._digits():
                raise _syntax(data[self.i], "in exponent of numeric literal")

    def _literal(self, word: bytes) -> None:
        data, n = self.data, len(self.data)
        for expected in word:
            if self.i >= n:
                raise GoJSONError("unexpected EOF")
            if data[self.i] != expected:
                raise _syntax(
                    data[self.i],
                    f"in literal {word.decode()} (expecting {_quote_char(expected)})",
                )
            self.i += 1
