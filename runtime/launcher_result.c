/* The JSON result of a captured run, written by the launcher (see launcher_result.h).
 *
 * Its text must be the one pynox writes when it supervises a run itself
 * (pynox.readable_json.dumps_readable): ASCII only, strings escaped as json.dumps
 * escapes them, output decoded as bytes.decode("utf-8", errors="replace") decodes
 * it. tests/test_launcher_result.py runs the same programs both ways and compares.
 */
#include "launcher_result.h"

#include "launcher_sys.h"

#define EXIT_TIMEOUT 124
#define EXIT_SETUP_FAILURE 125
#define SIGINT 2
/* The first byte of a report written once the process is confined
 * (pynox.engine.child_setup.REPORT_CONFINED). */
#define REPORT_CONFINED '\x06'
#define SLOT '\x01'
#define PLACEHOLDER '\0'

/* ---- netstrings ---------------------------------------------------------------- */

int netstring(struct text message, size_t *at, struct text *field)
{
    size_t i = *at;
    size_t length = 0;
    size_t digits = 0;
    for (; i < message.length && message.data[i] >= '0' && message.data[i] <= '9'; i++) {
        if (++digits > 12) {
            return -1;
        }
        length = length * 10 + (size_t)(message.data[i] - '0');
    }
    if (digits == 0 || i >= message.length || message.data[i] != ':') {
        return -1;
    }
    i++;
    if (length > message.length - i) {
        return -1;
    }
    field->data = message.data + i;
    field->length = length;
    *at = i + length;
    return 0;
}

struct text numbered_line(struct text lines, int number)
{
    struct text line = {NULL, 0};
    size_t start = 0;
    int at = 1;
    for (size_t i = 0; i <= lines.length; i++) {
        if (i == lines.length || lines.data[i] == '\n') {
            if (at == number) {
                line.data = lines.data + start;
                line.length = i - start;
                break;
            }
            at++;
            start = i + 1;
        }
    }
    return line;
}

/* ---- output streams -------------------------------------------------------------- */

int capture_init(struct capture *capture, size_t limit)
{
    capture->limit = limit;
    capture->share = limit - limit / 2;  /* what the tail may keep (Capture._tail_share) */
    capture->head_length = 0;
    capture->seen = 0;
    capture->truncated = 0;
    capture->head = sys_alloc(limit);
    capture->ring = sys_alloc(capture->share);
    return capture->head != NULL && capture->ring != NULL ? 0 : -1;
}

void capture_add(struct capture *capture, const char *data, size_t size)
{
    if (!capture->truncated) {
        size_t room = capture->limit - capture->head_length;
        size_t taken = size <= room ? size : room;
        memcpy(capture->head + capture->head_length, data, taken);
        capture->head_length += taken;
        capture->truncated = size > room;
    }
    if (capture->share > 0) {
        /* Only the last `share` bytes of this chunk can still be in the ring. */
        size_t skip = size > capture->share ? size - capture->share : 0;
        size_t at = (size_t)((capture->seen + skip) % capture->share);
        size_t rest = size - skip;
        size_t first = rest < capture->share - at ? rest : capture->share - at;
        memcpy(capture->ring + at, data + skip, first);
        memcpy(capture->ring, data + skip + first, rest - first);
    }
    capture->seen += size;
}

/* The stream's last `count` bytes (count <= share, count <= seen) into out. */
static void capture_last(const struct capture *capture, size_t count, char *out)
{
    size_t at = (size_t)((capture->seen - count) % capture->share);
    size_t first = count < capture->share - at ? count : capture->share - at;
    memcpy(out, capture->ring + at, first);
    memcpy(out + first, capture->ring, count - first);
}

/* ---- a buffered writer ------------------------------------------------------------ */

struct sink {
    char *data;
    size_t used;
    size_t size;
    int fd;  /* -1: a buffer in memory, sized for all it gets */
    int failed;
};

static void put(struct sink *sink, const char *data, size_t size)
{
    while (size > 0) {
        if (sink->used == sink->size) {
            if (sink->fd < 0 || write_all(sink->fd, sink->data, sink->used) != 0) {
                sink->failed = 1;
                return;
            }
            sink->used = 0;
        }
        size_t room = sink->size - sink->used;
        size_t n = size < room ? size : room;
        memcpy(sink->data + sink->used, data, n);
        sink->used += n;
        data += n;
        size -= n;
    }
}

static void put_text(struct sink *sink, const char *text)
{
    size_t n = 0;
    while (text[n] != '\0') {
        n++;
    }
    put(sink, text, n);
}

static void put_unsigned(struct sink *sink, unsigned long long value)
{
    char digits[24];
    size_t i = sizeof digits;
    do {
        digits[--i] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    put(sink, digits + i, sizeof digits - i);
}

static void put_long(struct sink *sink, long value)
{
    if (value < 0) {
        put(sink, "-", 1);
        put_unsigned(sink, 0ULL - (unsigned long long)value);
    } else {
        put_unsigned(sink, (unsigned long long)value);
    }
}

/* ---- JSON strings, as json.dumps (ensure_ascii) writes them ------------------------ */

static void put_unit(struct sink *sink, unsigned int unit)
{
    static const char hex[] = "0123456789abcdef";
    char escape[6] = {'\\', 'u', hex[(unit >> 12) & 15], hex[(unit >> 8) & 15],
                      hex[(unit >> 4) & 15], hex[unit & 15]};
    put(sink, escape, sizeof escape);
}

/* One code point of a string, escaped (a lone surrogate stays one, as in Python). */
static void put_code_point(struct sink *sink, unsigned int point)
{
    char c = (char)point;
    switch (point) {
    case '"':
        put(sink, "\\\"", 2);
        return;
    case '\\':
        put(sink, "\\\\", 2);
        return;
    case '\n':
        put(sink, "\\n", 2);
        return;
    case '\r':
        put(sink, "\\r", 2);
        return;
    case '\t':
        put(sink, "\\t", 2);
        return;
    case '\b':
        put(sink, "\\b", 2);
        return;
    case '\f':
        put(sink, "\\f", 2);
        return;
    default:
        break;
    }
    if (point >= 0x20 && point <= 0x7e) {
        put(sink, &c, 1);
    } else if (point < 0x10000) {
        put_unit(sink, point);
    } else {
        point -= 0x10000;
        put_unit(sink, 0xd800 | (point >> 10));
        put_unit(sink, 0xdc00 | (point & 0x3ff));
    }
}

static int continuation(unsigned char byte)
{
    return (byte & 0xc0) == 0x80;
}

/* The length of the UTF-8 sequence at data[0], and its code point; 0 and the length
 * of its longest valid start (the bytes one U+FFFD replaces) if it is not one. */
static size_t utf8_sequence(const unsigned char *data, size_t size, unsigned int *point,
                            size_t *invalid)
{
    unsigned char lead = data[0];
    size_t need;
    unsigned char low = 0x80;
    unsigned char high = 0xbf;
    if (lead < 0x80) {
        *point = lead;
        return 1;
    }
    if (lead >= 0xc2 && lead <= 0xdf) {
        need = 2;
        *point = lead & 0x1fU;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        need = 3;
        *point = lead & 0x0fU;
        low = lead == 0xe0 ? 0xa0 : 0x80;
        high = lead == 0xed ? 0x9f : 0xbf;  /* no surrogates */
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        need = 4;
        *point = lead & 0x07U;
        low = lead == 0xf0 ? 0x90 : 0x80;
        high = lead == 0xf4 ? 0x8f : 0xbf;  /* nothing past U+10FFFF */
    } else {
        *invalid = 1;
        return 0;
    }
    for (size_t i = 1; i < need; i++) {
        unsigned char byte = i < size ? data[i] : 0;
        int valid = i < size && (i == 1 ? byte >= low && byte <= high : continuation(byte));
        if (!valid) {
            *invalid = i;
            return 0;
        }
        *point = (*point << 6) | (byte & 0x3fU);
    }
    return need;
}

/* Bytes as a JSON string's contents: decoded as UTF-8, each invalid sequence one U+FFFD. */
static void put_decoded(struct sink *sink, const char *text, size_t size)
{
    const unsigned char *data = (const unsigned char *)text;
    size_t i = 0;
    while (i < size) {
        unsigned int point = 0;
        size_t invalid = 0;
        size_t length = utf8_sequence(data + i, size - i, &point, &invalid);
        if (length == 0) {
            put_unit(sink, 0xfffd);
            i += invalid;
        } else {
            put_code_point(sink, point);
            i += length;
        }
    }
}

/* ---- what a stream keeps (supervisor.Capture.kept) -------------------------------- */

static size_t utf8_end(const char *text, size_t size)
{
    const unsigned char *data = (const unsigned char *)text;
    for (size_t back = 1; back <= size && back <= 4; back++) {
        unsigned char byte = data[size - back];
        if (!continuation(byte)) {
            size_t need = byte >> 5 == 0x6 ? 2 : byte >> 4 == 0xe ? 3 : 4;
            if (byte < 0x80 || byte >> 3 > 0x1e) {
                need = 1;
            }
            return back >= need ? size : size - back;
        }
    }
    return size;
}

static void put_left_out(struct sink *sink, unsigned long long count)
{
    put_text(sink, "[... ");
    put_unsigned(sink, count);
    put_text(sink, " bytes left out ...]\n");
}

static size_t digits_of(unsigned long long value)
{
    size_t n = 1;
    while (value >= 10) {
        value /= 10;
        n++;
    }
    return n;
}

/* The stream as the result shows it, into `kept` (limit + a line's room, at least). */
static size_t capture_kept(const struct capture *capture, char *kept, size_t room)
{
    struct sink out = {kept, 0, room, -1, 0};
    if (!capture->truncated) {
        put(&out, capture->head, capture->head_length);
        return out.used;
    }
    size_t line = sizeof "[...  bytes left out ...]\n" - 1 + digits_of(capture->seen);
    if (capture->limit < line + 1) {
        /* Too small for the line: the head alone, to the end of its last whole character. */
        put(&out, capture->head, utf8_end(capture->head, capture->head_length));
        return out.used;
    }
    /* With room for the line, a budget of 0 or 1 keeps no head: the line, then the tail. */
    size_t budget = capture->limit - line - 1;
    size_t head_size = budget / 2;
    size_t tail_size = budget - head_size;
    /* The head, up to the end of a line if that keeps three quarters of it. */
    size_t newline = head_size;
    while (newline > 0 && capture->head[newline - 1] != '\n') {
        newline--;
    }
    int at_line = newline > 0 && newline >= head_size * 3 / 4;
    size_t head = at_line ? newline : utf8_end(capture->head, head_size);
    /* The tail, from the start of a line if that keeps three quarters of it. */
    char *tail = kept + room - tail_size;  /* the buffer's end: free until the tail goes */
    capture_last(capture, tail_size, tail);
    size_t start = 0;
    while (start < tail_size && tail[start] != '\n') {
        start++;
    }
    if (start < tail_size && start + 1 <= tail_size / 4) {
        start++;
    } else {
        start = 0;
        while (start < 3 && start < tail_size && continuation((unsigned char)tail[start])) {
            start++;
        }
    }
    size_t tail_length = tail_size - start;
    put(&out, capture->head, head);
    if (head > 0 && capture->head[head - 1] != '\n') {
        put(&out, "\n", 1); /* no head: nothing to end, no line to add */
    }
    put_left_out(&out, capture->seen - head - tail_length);
    memmove(out.data + out.used, tail + start, tail_length);
    return out.used + tail_length;
}

/* ---- the error report: a flat JSON object (pynox.engine.result._trusted_report) --- */

enum value_kind { ABSENT, STRING, INTEGER, OTHER };

struct value {
    enum value_kind kind;
    struct text text;  /* STRING: the string as the result writes it, without quotes */
    long integer;
};

struct report {
    struct value type, message, file, line, path, hint_kind, hint_value;
};

struct parser {
    const unsigned char *at;
    const unsigned char *end;
    struct sink *arena;
};

static void skip_space(struct parser *p)
{
    while (p->at < p->end && (*p->at == ' ' || *p->at == '\t' || *p->at == '\n' || *p->at == '\r')) {
        p->at++;
    }
}

static int hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
        return (c | 0x20) - 'a' + 10;
    }
    return -1;
}

/* A JSON string at p->at ('"'), rewritten into the arena as the result writes it. */
static int parse_string(struct parser *p, struct text *out)
{
    struct sink *arena = p->arena;
    size_t begin = arena->used;
    p->at++;
    for (;;) {
        if (p->at >= p->end) {
            return -1;
        }
        unsigned char c = *p->at;
        if (c == '"') {
            p->at++;
            break;
        }
        if (c < 0x20) {
            return -1;  /* a raw control character (json's strict mode) */
        }
        if (c == '\\') {
            if (p->end - p->at < 2) {
                return -1;
            }
            unsigned int point;
            switch (p->at[1]) {
            case '"':
            case '\\':
            case '/':
                point = p->at[1];
                break;
            case 'b':
                point = '\b';
                break;
            case 'f':
                point = '\f';
                break;
            case 'n':
                point = '\n';
                break;
            case 'r':
                point = '\r';
                break;
            case 't':
                point = '\t';
                break;
            case 'u':
                if (p->end - p->at < 6) {
                    return -1;
                }
                point = 0;
                for (int i = 2; i < 6; i++) {
                    int digit = hex_digit(p->at[i]);
                    if (digit < 0) {
                        return -1;
                    }
                    point = point * 16 + (unsigned int)digit;
                }
                p->at += 4;
                break;
            default:
                return -1;
            }
            p->at += 2;
            /* A surrogate pair escaped as two is written as two again: each alone. */
            put_code_point(arena, point);
            continue;
        }
        unsigned int point = 0;
        size_t invalid = 0;
        size_t length = utf8_sequence(p->at, (size_t)(p->end - p->at), &point, &invalid);
        if (length == 0) {
            return -1;  /* not UTF-8: python cannot decode the report */
        }
        put_code_point(arena, point);
        p->at += length;
    }
    if (arena->failed) {
        return -1;
    }
    out->data = arena->data + begin;
    out->length = arena->used - begin;
    return 0;
}

/* An integer (-?(0|[1-9][0-9]*)) that fits 64 bits; a fraction or exponent fails. */
static int parse_integer(struct parser *p, long *out)
{
    int negative = 0;
    if (*p->at == '-') {
        negative = 1;
        p->at++;
    }
    if (p->at >= p->end || *p->at < '0' || *p->at > '9') {
        return -1;
    }
    unsigned long long magnitude = 0;
    unsigned long long bound = negative ? 9223372036854775808ULL : 9223372036854775807ULL;
    if (*p->at == '0') {
        p->at++;
    } else {
        while (p->at < p->end && *p->at >= '0' && *p->at <= '9') {
            unsigned int digit = (unsigned int)(*p->at - '0');
            if (magnitude > (bound - digit) / 10) {
                return -1;
            }
            magnitude = magnitude * 10 + digit;
            p->at++;
        }
    }
    if (p->at < p->end && (*p->at == '.' || *p->at == 'e' || *p->at == 'E')) {
        return -1;  /* a float: not in a report */
    }
    *out = negative ? (long)(0ULL - magnitude) : (long)magnitude;
    return 0;
}

static int parse_literal(struct parser *p, const char *word)
{
    for (; *word != '\0'; word++, p->at++) {
        if (p->at >= p->end || *p->at != (unsigned char)*word) {
            return -1;
        }
    }
    return 0;
}

static int parse_value(struct parser *p, struct value *value)
{
    if (p->at >= p->end) {
        return -1;
    }
    switch (*p->at) {
    case '"':
        value->kind = STRING;
        return parse_string(p, &value->text);
    case 't':
        value->kind = OTHER;
        return parse_literal(p, "true");
    case 'f':
        value->kind = OTHER;
        return parse_literal(p, "false");
    case 'n':
        value->kind = OTHER;
        return parse_literal(p, "null");
    default:
        value->kind = INTEGER;
        return parse_integer(p, &value->integer);  /* nested values fail here too */
    }
}

int text_is(struct text text, const char *word)
{
    size_t i = 0;
    for (; word[i] != '\0'; i++) {
        if (i >= text.length || text.data[i] != word[i]) {
            return 0;
        }
    }
    return i == text.length;
}

static struct value *field_named(struct report *report, struct text key)
{
    if (text_is(key, "type")) {
        return &report->type;
    }
    if (text_is(key, "message")) {
        return &report->message;
    }
    if (text_is(key, "file")) {
        return &report->file;
    }
    if (text_is(key, "line")) {
        return &report->line;
    }
    if (text_is(key, "path")) {
        return &report->path;
    }
    if (text_is(key, "hint_kind")) {
        return &report->hint_kind;
    }
    if (text_is(key, "hint_value")) {
        return &report->hint_value;
    }
    return NULL;
}

/* A flat JSON object with text around it only of JSON's white space; 0, or -1. */
static int parse_report(const char *data, size_t size, struct sink *arena, struct report *report)
{
    struct parser p = {(const unsigned char *)data, (const unsigned char *)data + size, arena};
    skip_space(&p);
    if (p.at >= p.end || *p.at != '{') {
        return -1;
    }
    p.at++;
    skip_space(&p);
    if (p.at < p.end && *p.at == '}') {
        p.at++;
    } else {
        for (;;) {
            struct text key;
            struct value value = {ABSENT, {NULL, 0}, 0};
            if (p.at >= p.end || *p.at != '"' || parse_string(&p, &key) != 0) {
                return -1;
            }
            skip_space(&p);
            if (p.at >= p.end || *p.at != ':') {
                return -1;
            }
            p.at++;
            skip_space(&p);
            if (parse_value(&p, &value) != 0) {
                return -1;
            }
            struct value *field = field_named(report, key);
            if (field != NULL) {
                *field = value;  /* a repeated key: the last one counts, as in Python */
            }
            skip_space(&p);
            if (p.at < p.end && *p.at == ',') {
                p.at++;
                skip_space(&p);
                continue;
            }
            if (p.at < p.end && *p.at == '}') {
                p.at++;
                break;
            }
            return -1;
        }
    }
    skip_space(&p);
    return p.at == p.end ? 0 : -1;
}

static int exit_code_of(const struct run_end *end)
{
    if (end->timed_out) {
        return EXIT_TIMEOUT;
    }
    int signal = end->status & 0x7f;
    return signal != 0 ? 128 + signal : (end->status >> 8) & 0xff;
}

/* The report, when how the run ended says pynox could have written it. */
static int trusted_report(const struct capture *capture, const struct run_end *end,
                          struct sink *arena, struct report *report)
{
    if (capture->seen == 0 || capture->truncated || end->timed_out) {
        return -1;
    }
    const char *data = capture->head;
    size_t size = capture->head_length;
    int confined = data[0] == REPORT_CONFINED;
    int code = exit_code_of(end);
    if (confined) {
        if (code != 1 && (end->status & 0x7f) != SIGINT) {
            return -1;
        }
        data++;
        size--;
    } else if (code != EXIT_SETUP_FAILURE) {
        return -1;
    }
    if (parse_report(data, size, arena, report) != 0) {
        return -1;
    }
    int says_sandbox = report->type.kind == STRING && text_is(report->type.text, "SandboxError");
    return confined == says_sandbox ? -1 : 0;
}

/* ---- the result --------------------------------------------------------------------- */

static void put_string_or_null(struct sink *sink, const struct value *value)
{
    if (value->kind != STRING) {
        put_text(sink, "null");
        return;
    }
    put(sink, "\"", 1);
    put(sink, value->text.data, value->text.length);
    put(sink, "\"", 1);
}

/* The text pynox sent for a kind of hint; data NULL if none. */
static struct text hint_text(struct text hints, struct text wanted)
{
    size_t at = 0;
    struct text kind;
    struct text hint;
    while (netstring(hints, &at, &kind) == 0 && netstring(hints, &at, &hint) == 0) {
        if (kind.length == wanted.length && memcmp(kind.data, wanted.data, kind.length) == 0) {
            return hint;
        }
    }
    struct text none = {NULL, 0};
    return none;
}

/* A hint that takes no value, as a JSON string; "null" if pynox sent none. */
static void put_plain_hint(struct sink *sink, struct text hints, const char *kind)
{
    struct text wanted = {kind, 0};
    while (kind[wanted.length] != '\0') {
        wanted.length++;
    }
    struct text hint = hint_text(hints, wanted);
    if (hint.data == NULL) {
        put_text(sink, "null");
        return;
    }
    put(sink, "\"", 1);
    put_decoded(sink, hint.data, hint.length);
    put(sink, "\"", 1);
}

/* Whether a character would break a hint's line or turn its text around: control
 * characters, line and paragraph separators, bidirectional overrides. */
static int breaks_line(unsigned int point)
{
    return point < 0x20 || (point >= 0x7f && point <= 0x9f) ||
           (point >= 0x2028 && point <= 0x202e) || (point >= 0x2066 && point <= 0x2069);
}

/* Whether the shell reads the character as part of one word (shlex.quote's set). */
static int plain_in_shell(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    for (const char *other = "_@%+=:,./-"; *other != '\0'; other++)
        if (c == (unsigned char)*other)
            return 1;
    return 0;
}

/* How a hint shows its value, a path the program named, by the rules of
 * pynox.engine.hint_style.shown_path: SHOWN_PLAIN as it is, SHOWN_QUOTED in single
 * quotes, SHOWN_NOT for no hint at all. value is as parse_string wrote it: printable
 * ASCII as itself, any other character escaped. */
enum shown { SHOWN_NOT, SHOWN_PLAIN, SHOWN_QUOTED };

static enum shown value_shown(struct text value)
{
    enum shown shown = value.length > 0 ? SHOWN_PLAIN : SHOWN_NOT;
    for (size_t i = 0; shown != SHOWN_NOT && i < value.length; i++) {
        unsigned char c = (unsigned char)value.data[i];
        if (c != '\\') {
            if (!plain_in_shell(c))
                shown = SHOWN_QUOTED;
            continue;
        }
        if (i + 1 >= value.length)
            return SHOWN_NOT;
        char escaped = value.data[++i];
        if (escaped == '"' || escaped == '\\') {
            shown = SHOWN_QUOTED;
            continue;
        }
        if (escaped != 'u' || value.length - i < 5)
            return SHOWN_NOT; /* \n, \t and the like: control characters */
        unsigned int point = 0;
        for (size_t k = 1; k <= 4; k++) {
            int digit = hex_digit((unsigned char)value.data[i + k]);
            if (digit < 0)
                return SHOWN_NOT;
            point = point * 16 + (unsigned int)digit;
        }
        i += 4;
        shown = breaks_line(point) ? SHOWN_NOT : SHOWN_QUOTED;
    }
    return shown;
}

/* The value in single quotes, a quote in it as '"'"' (escaped for JSON). */
static void put_quoted(struct sink *sink, struct text value)
{
    put(sink, "'", 1);
    size_t piece = 0;
    for (size_t i = 0; i <= value.length; i++) {
        if (i == value.length || value.data[i] == '\'') {
            put(sink, value.data + piece, i - piece);
            if (i < value.length)
                put_text(sink, "'\\\"'\\\"'");
            piece = i + 1;
        }
    }
    put(sink, "'", 1);
}

/* The hint of a kind with its value, from the texts pynox sent; "null" if none. */
static void put_hint(struct sink *sink, struct text hints, const struct report *report)
{
    if (report->hint_kind.kind != STRING) {
        put_text(sink, "null");
        return;
    }
    struct text hint = hint_text(hints, report->hint_kind.text);
    int needs_value = 0;
    for (size_t i = 0; i < hint.length; i++) {
        needs_value |= hint.data[i] == PLACEHOLDER;
    }
    if (hint.data == NULL || (needs_value && report->hint_value.kind != STRING)) {
        put_text(sink, "null");
        return;
    }
    enum shown shown = needs_value ? value_shown(report->hint_value.text) : SHOWN_PLAIN;
    if (shown == SHOWN_NOT) {
        put_text(sink, "null");
        return;
    }
    put(sink, "\"", 1);
    size_t piece = 0;
    for (size_t i = 0; i <= hint.length; i++) {
        if (i == hint.length || hint.data[i] == PLACEHOLDER) {
            put_decoded(sink, hint.data + piece, i - piece);
            if (i < hint.length && shown == SHOWN_QUOTED) {
                put_quoted(sink, report->hint_value.text);
            } else if (i < hint.length) {
                put(sink, report->hint_value.text.data, report->hint_value.text.length);
            }
            piece = i + 1;
        }
    }
    put(sink, "\"", 1);
}

static void put_signal_error(struct sink *sink, const struct result_frame *frame,
                             const struct run_end *end)
{
    int signal = end->status & 0x7f;
    struct text name = numbered_line(frame->signal_names, signal);
    put_text(sink, "{\"type\": \"Signal\", \"message\": \"the program was killed by ");
    if (name.length > 0) {
        put_decoded(sink, name.data, name.length);
    } else {
        put_text(sink, "signal ");
        put_long(sink, signal);
    }
    put_text(sink, "\", \"file\": null, \"line\": null, \"path\": null, \"hint\": ");
    if (end->native_signal) {
        put_plain_hint(sink, frame->hints, "native_abort");
    } else {
        put_text(sink, "null");
    }
    put_text(sink, "}");
}

static void put_native_exit_error(struct sink *sink, const struct result_frame *frame,
                                  const struct run_end *end)
{
    put_text(sink, "{\"type\": \"NativeExit\", \"message\": \"native code ended the program "
                   "with exit status ");
    put_long(sink, (end->status >> 8) & 0xff);
    put_text(sink, "\", \"file\": null, \"line\": null, \"path\": null, \"hint\": ");
    put_plain_hint(sink, frame->hints, "native_exit");
    put_text(sink, "}");
}

static void put_error(struct sink *sink, const struct result_frame *frame,
                      const struct capture *report_stream, const struct run_end *end)
{
    if (end->timed_out) {
        const struct text *error = end->stopped ? &frame->stopped_error : &frame->timeout_error;
        put(sink, error->data, error->length);
        return;
    }
    /* The report's strings, rewritten, take at most six times its size (a raw DEL
     * becomes \u007f). */
    size_t room = 6 * report_stream->head_length + 16;
    struct sink arena = {sys_alloc(room), 0, room, -1, 0};
    struct report report = {{ABSENT, {NULL, 0}, 0}, {ABSENT, {NULL, 0}, 0},
                            {ABSENT, {NULL, 0}, 0}, {ABSENT, {NULL, 0}, 0},
                            {ABSENT, {NULL, 0}, 0}, {ABSENT, {NULL, 0}, 0},
                            {ABSENT, {NULL, 0}, 0}};
    if (arena.data != NULL && trusted_report(report_stream, end, &arena, &report) == 0) {
        put_text(sink, "{\"type\": ");
        put_string_or_null(sink, &report.type);
        put_text(sink, ", \"message\": ");
        put_string_or_null(sink, &report.message);
        put_text(sink, ", \"file\": ");
        put_string_or_null(sink, &report.file);
        put_text(sink, ", \"line\": ");
        if (report.line.kind == INTEGER) {
            put_long(sink, report.line.integer);
        } else {
            put_text(sink, "null");
        }
        put_text(sink, ", \"path\": ");
        put_string_or_null(sink, &report.path);
        put_text(sink, ", \"hint\": ");
        put_hint(sink, frame->hints, &report);
        put_text(sink, "}");
    } else if ((end->status & 0x7f) != 0) {
        put_signal_error(sink, frame, end);
    } else if (end->native_exit) {
        put_native_exit_error(sink, frame, end);
    } else {
        put_text(sink, "null");
    }
    sys_free(arena.data, room);
}

static void put_stream(struct sink *sink, const struct capture *capture)
{
    size_t room = capture->limit + 64;
    char *kept = sys_alloc(room);
    put(sink, "\"", 1);
    if (kept == NULL) {
        sink->failed = 1;
    } else {
        put_decoded(sink, kept, capture_kept(capture, kept, room));
    }
    put(sink, "\"", 1);
    sys_free(kept, room);
}

/* round(milliseconds), which rounds half to even. */
static unsigned long long rounded_ms(long ns)
{
    unsigned long long total = ns > 0 ? (unsigned long long)ns : 0;
    unsigned long long ms = total / 1000000;
    unsigned long long rest = total % 1000000;
    return rest > 500000 || (rest == 500000 && ms % 2 == 1) ? ms + 1 : ms;
}

int write_result(int fd, const struct result_frame *frame, struct capture *out,
                 struct capture *err, struct capture *report, const struct run_end *end)
{
    static char buffer[65536];
    struct sink sink = {buffer, 0, sizeof buffer, fd, 0};
    int code = exit_code_of(end);
    const char *layout = frame->layout.data;
    size_t size = frame->layout.length;
    for (size_t i = 0; i < size; i++) {
        if (layout[i] != SLOT || i + 1 == size) {
            put(&sink, layout + i, 1);
            continue;
        }
        switch (layout[++i]) {
        case 'x':
            put_long(&sink, code);
            break;
        case 'o':
            put_stream(&sink, out);
            break;
        case 'e':
            put_stream(&sink, err);
            break;
        case 'O':
            put_text(&sink, out->truncated ? "true" : "false");
            break;
        case 'E':
            put_text(&sink, err->truncated ? "true" : "false");
            break;
        case 'r':
            put_error(&sink, frame, report, end);
            break;
        case 'd':
            put_unsigned(&sink, rounded_ms(end->duration_ns));
            break;
        default:
            break;
        }
    }
    put(&sink, "\n", 1);
    if (!sink.failed && write_all(fd, sink.data, sink.used) != 0) {
        sink.failed = 1;
    }
    return sink.failed && code == 0 ? 1 : code;
}
