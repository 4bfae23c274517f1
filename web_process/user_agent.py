"""A browser's User-Agent as a few words people read: `Chrome on Android`.

A device paired without a name is called after the person and this (`ana's Chrome on Android`),
which is what `elicitron devices`, the audit's BY column and `rules`' MADE BY then show. Only the
fixed words below ever come out, whatever the header says: it is the paired browser's to choose,
so it is read, never copied.
"""

# Order matters: Edge, Opera and Samsung Internet say "Chrome" too, Chrome says "Safari", and
# Chrome and Firefox on iOS name themselves CriOS and FxiOS.
_BROWSERS = (
    ("Edg/", "Edge"), ("EdgA/", "Edge"), ("EdgiOS/", "Edge"),
    ("OPR/", "Opera"), ("SamsungBrowser/", "Samsung Internet"),
    ("Firefox/", "Firefox"), ("FxiOS/", "Firefox"),
    ("CriOS/", "Chrome"), ("Chromium/", "Chromium"), ("HeadlessChrome/", "Chrome"), ("Chrome/", "Chrome"),
    ("Safari/", "Safari"),
)
# Android before Linux (its UA says both), iPhone and iPad before macOS (an iPad may say "Mac OS X").
_SYSTEMS = (
    ("Android", "Android"), ("iPhone", "iPhone"), ("iPad", "iPad"), ("CrOS", "ChromeOS"),
    ("Windows", "Windows"), ("Macintosh", "macOS"), ("Mac OS X", "macOS"), ("Linux", "Linux"),
)


def browser_on_system(user_agent: str) -> str:
    """`Chrome on Android`, `Firefox`, `Safari on iPhone`; "browser" when nothing is recognised."""
    browser = next((name for token, name in _BROWSERS if token in user_agent), "browser")
    system = next((name for token, name in _SYSTEMS if token in user_agent), "")
    return f"{browser} on {system}" if system else browser


def device_name(person: str, user_agent: str) -> str:
    """The name of a device paired without one: whose it is and what it is."""
    return f"{person}'s {browser_on_system(user_agent)}" if person else browser_on_system(user_agent)
