"""One escaping function per output format, for every user-supplied string (test and metric names, run
ids, commits, labels, reasons) that reaches that output; and the one function that masks credentials in
a URL. A string is data: whatever it holds, it must not start a line, a workflow command, a code span or
a tag of its own in the output it is printed into (docs/security.md lists what each output does).
"""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qsl, quote, urlsplit

# Characters that move the cursor, end a line or reorder text on a terminal: C0/C1 controls, DEL, the
# Unicode line and paragraph separators and the bidirectional overrides ("Trojan Source"); and the halves
# of UTF-16 surrogate pairs, which no UTF-8 log can hold (writing one raises UnicodeEncodeError).
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# XML 1.0 allows tab, newline and carriage return among the controls, and no surrogates or U+FFFE/U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# Characters GitHub's markdown reads as syntax in the middle of a line: emphasis, code, links and images
# (`[`), raw HTML and entities (`<`, `&`), table cells (`|`), strikethrough (`~`) and math (`$`).
# (`#`, `-`, `+`, `.` are syntax only at the start of a line, where no escaped text is put.)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]<>|~&$])")
# `_` between two letters or digits never starts emphasis (CommonMark's flanking rules): `raw_reward` stays
# readable in the raw text; any other `_` is escaped.
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_BACKTICKS = re.compile("`+")


def _visible(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def invisible_characters(text: str) -> list[str]:
    """The control characters of `text` (as `U+XXXX`), for messages that refuse them."""
    return [f"U+{ord(c):04X}" for c in dict.fromkeys(_INVISIBLE.findall(text))]


def terminal(text: str, *, lines: bool = False) -> str:
    """Text for a terminal or a CI log: every control character shown as `\\xNN`, so a name can neither
    start a line (a line starting `::` is a GitHub workflow command in a job's log) nor move the cursor.
    `lines=True` keeps `\\n` for gatecfg's own multi-line messages, whose names are validated (printable)
    and whose quoted values are shown as JSON or repr, with their newlines escaped."""
    if lines:
        return "\n".join(_INVISIBLE.sub(_visible, line) for line in text.split("\n"))
    return _INVISIBLE.sub(_visible, text)


def github_data(text: str) -> str:
    """The message part of a GitHub workflow command (`::error ...::DATA`), escaped as the runner
    unescapes it: `%`, `\\r` and `\\n`."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(text: str) -> str:
    """A property value of a workflow command (`file=...,title=...`): also `:` and `,`."""
    return github_data(text).replace(":", "%3A").replace(",", "%2C")


_QUOTED_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_QUOTED_SPECIAL = re.compile('[\\\\"' + _INVISIBLE.pattern[1:-1] + "]")


def quoted(text: str) -> str:
    """`text` as a double-quoted string literal that YAML (1.1 and 1.2) and TOML both read back as `text`
    (`init` writes every name it was given through this, into gate files, workflows and settings): `\\`
    and `"` escaped, every control, line separator or bidirectional override as `\\uXXXX`, so no value
    ends the scalar, starts a key, an anchor, a tag or a comment, or hides what it says."""

    def escape(found: re.Match[str]) -> str:
        char = found.group()
        return _QUOTED_ESCAPES.get(char) or f"\\u{ord(char):04x}"

    return '"' + _QUOTED_SPECIAL.sub(escape, text) + '"'


def markdown_code(text: str) -> str:
    """`text` as one inline code span, whatever backticks, pipes or newlines it holds (CommonMark: a
    fence longer than any run of backticks inside, padded with a space when the text starts or ends
    with one)."""
    text = terminal(text.replace("\r\n", " ").replace("\n", " ").replace("\r", " "))
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    # GFM splits table cells on `|` even inside code spans; `\|` is its documented escape there.
    body = text.replace("|", "\\|")
    return f"{fence}{pad}{body}{pad}{fence}"


def markdown_text(text: str) -> str:
    """`text` as literal markdown (and HTML, which GitHub renders in markdown) on one line."""
    flat = terminal(text.replace("\r\n", " ").replace("\n", " ").replace("\r", " "))
    return _UNDERSCORE.sub(r"\\_", _MARKDOWN_SPECIAL.sub(r"\\\1", flat))


def markdown_url(url: str) -> str:
    """A link destination in markdown (`[text](URL)`): every character that could end it or start other
    markup (`)`, `(`, `<`, `>`, blanks, backslashes, quotes, controls) percent-encoded; the URL's own
    structure (`:/?#&=%`) kept."""
    return quote(url, safe=":/?#&=%@+,;~!*.-_'$")


def xml_text(text: str) -> str:
    """Text for an XML document (JUnit): characters XML 1.0 cannot hold at all shown as `\\xNN`; the
    serializer escapes `&`, `<`, `>` and quotes."""
    return _NOT_XML.sub(_visible, text)


def html_text(text: object) -> str:
    """Text or an attribute value in HTML: `&`, `<`, `>` and both quotes as entities."""
    return html.escape(str(text), quote=True)


def mathtext_label(text: str) -> str:
    """A matplotlib label or title shown literally: `$` would start mathtext, which fails on most text
    between two dollars (`m$\\frac{$x`); matplotlib's documented escape is `\\$`."""
    return terminal(text).replace("$", r"\$")


# Query parameters that carry credentials in database and service URLs (libpq's `password` and
# `sslpassword`, tokens and keys of HTTP services); compared case-insensitively, after `-`/`_` removal.
SECRET_PARAMETERS = frozenset(
    {
        "password",
        "passwd",
        "pwd",
        "pass",
        "secret",
        "token",
        "accesstoken",
        "authtoken",
        "apikey",
        "key",
        "sslpassword",
        "sslkey",
        "clientsecret",
        "signature",
        "sig",
        "credential",
        "credentials",
        "auth",
    }
)
MASK = "***"
# What remains of a URL that does not parse: the scheme, so the reader sees which kind was meant.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


def _secret(name: str) -> bool:
    plain = name.lower().replace("-", "").replace("_", "")
    return plain in SECRET_PARAMETERS or plain.endswith(("password", "secret", "token"))


def mask_url(url: str) -> str:
    """`url` with every credential masked: the password of its user info and the value of every
    query parameter that names a secret. A URL that does not split is shown as its scheme only."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # a malformed port or host raises here
    except ValueError:
        scheme = _SCHEME.match(url)
        return f"{scheme.group(1)}://{MASK}" if scheme else MASK
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}{':' + MASK if colon else ''}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = "&".join(
            f"{quote(name, safe='')}={MASK if _secret(name) else quote(value, safe='/:')}"
            for name, value in pairs
        )
    fragment = MASK if parts.fragment and "=" in parts.fragment else parts.fragment
    # Joined by hand: urlunsplit drops the `//` of `sqlite:///path`, whose netloc is empty.
    text = f"{parts.scheme}:" if parts.scheme else ""
    text += f"//{netloc}" if url[len(text) :].startswith("//") else netloc
    text += parts.path + (f"?{query}" if query else "") + (f"#{fragment}" if fragment else "")
    return text
