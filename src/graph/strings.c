/*
 * strings.c — the scalar semantics of the string ops, in one place: shape inference
 * (which stopwords a constant input loses) and the ref interpreter (which runs the ops)
 * call the same functions, so the two cannot disagree.
 *
 * Case mapping is ASCII: 'A'..'Z' <-> 'a'..'z'; every other byte (UTF-8 sequences
 * included) passes through unchanged, so the output is valid UTF-8 when the input is.
 * ONNX names a locale for StringNormalizer; kiln does not apply one.
 */
#include "graph.h"

#include <string.h>

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }
static int upper(int c) { return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c; }

/* Equal, with ASCII letters folded when fold. */
static bool same_text(const char *a, const char *b, bool fold) {
  if (!fold) return strcmp(a, b) == 0;
  for (; *a && *b; a++, b++)
    if (lower((unsigned char)*a) != lower((unsigned char)*b)) return false;
  return *a == *b;
}

bool str_keep(const StrAttr *a, const char *s) {
  for (int i = 0; i < a->n_words; i++)
    if (same_text(s, a->words[i], !a->case_sensitive)) return false;
  return true;
}

void str_case(const StrAttr *a, const char *s, char *buf) {
  size_t i = 0;
  for (; s[i]; i++) {
    int c = (unsigned char)s[i];
    buf[i] = (char)(a->case_change == 1 ? lower(c) : a->case_change == 2 ? upper(c) : c);
  }
  buf[i] = 0;
}

/* Strings compare by bytes, numbers by their bits (so a NaN key finds the same NaN, and
 * -0.0 and 0.0 are different keys). Linear: tables are small. */
int64_t str_label_find(const StrAttr *a, const void *src, int64_t i) {
  size_t es = kiln_dtype_size(a->key_t);
  const char *x = (const char *)src + (size_t)i * es;
  for (int64_t k = 0; k < a->n_keys; k++) {
    if (a->key_t == KILN_STRING) {
      const char *s = ((const char *const *)src)[i];
      if (!strcmp(((const char *const *)a->keys)[k], s ? s : "")) return k;
    } else if (!memcmp((const char *)a->keys + (size_t)k * es, x, es)) {
      return k;
    }
  }
  return -1;
}

/* n elements of dtype t into the arena (strings deep). */
static const void *copy_elems(Arena *arena, kiln_dtype t, int64_t n, const void *src) {
  if (t == KILN_STRING) return arena_strings(arena, src, n);
  size_t bytes = (size_t)n * kiln_dtype_size(t);
  void *d = arena_alloc(arena, bytes ? bytes : 1);
  if (d && bytes) memcpy(d, src, bytes);
  return d;
}

StrAttr *str_attr_copy(Arena *arena, const StrAttr *a) {
  StrAttr *c = arena_alloc(arena, sizeof *c);
  if (!c) return NULL;
  *c = *a;
  if (a->n_words && !(c->words = arena_strings(arena, (const char *const *)a->words, a->n_words))) return NULL;
  if (a->pattern && !(c->pattern = arena_strdup(arena, a->pattern))) return NULL;
  if (a->n_keys && (!(c->keys = copy_elems(arena, a->key_t, a->n_keys, a->keys)) ||
                    !(c->values = copy_elems(arena, a->val_t, a->n_keys, a->values))))
    return NULL;
  if (a->dflt && !(c->dflt = copy_elems(arena, a->val_t, 1, a->dflt))) return NULL;
  return c;
}

/* ---- RegexFullMatch: RE2 syntax -> POSIX extended ---- */

typedef struct Rx { StrBuf out; const char *why; } Rx;

/* The ASCII class of escape c ('w', 'd', 's'), as a POSIX bracket item; NULL for others. */
static const char *class_item(char c) {
  switch (c) {
  case 'w': return "[:alnum:]_";
  case 'd': return "[:digit:]";
  case 's': return "[:space:]";
  default: return NULL;
  }
}

/* [...] starting after '['; returns the position after ']', or NULL (r->why set). POSIX
 * brackets have no escapes: a ']' goes first, a '-' last, a backslash is literal. */
static const char *rx_bracket(Rx *r, const char *p) {
  StrBuf items = { 0 };
  bool neg = *p == '^', dash = false, close = false, caret = false;
  if (neg) p++;
  for (bool first = true; *p && (first || *p != ']'); first = false) {
    char c = *p++;
    if (c == '[' && *p == ':') {  /* a POSIX class passes through */
      const char *e = strstr(p, ":]");
      if (!e) { r->why = "an unterminated [: :] class"; break; }
      sb_printf(&items, "[%.*s", (int)(e + 2 - p), p);
      p = e + 2;
      continue;
    }
    bool esc = c == '\\';
    if (esc) {
      char e = *p++;
      if (!e) { r->why = "a trailing backslash"; break; }
      if (class_item(e)) { sb_puts(&items, class_item(e)); continue; }
      if (e == 'n') c = '\n';
      else if (e == 't') c = '\t';
      else if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
        r->why = "an escape inside [] other than \\w \\d \\s \\n \\t";
        break;
      } else c = e;
    }
    if (c == '-' && (*p == ']' || first || esc)) { dash = true; continue; }  /* a literal '-' */
    if (c == ']') { close = true; continue; }
    if (c == '^') { caret = true; continue; }  /* first it would negate: it goes last */
    if (c == '[') { sb_puts(&items, "["); continue; }
    sb_printf(&items, "%c", c);
  }
  if (!r->why && *p != ']') r->why = "an unterminated [";
  if (!r->why && !close && !items.len && caret && !dash) sb_printf(&r->out, "%s", neg ? "[^^]" : "\\^");
  else if (!r->why)
    sb_printf(&r->out, "[%s%s%s%s%s]", neg ? "^" : "", close ? "]" : "", items.s ? items.s : "", caret ? "^" : "",
              dash ? "-" : "");
  sb_free(&items);
  return r->why ? NULL : p + 1;
}

static void rx_translate(Rx *r, const char *p) {
  while (*p && !r->why) {
    char c = *p++;
    switch (c) {
    case '[':
      p = rx_bracket(r, p);
      if (!p) return;
      break;
    case '(':
      if (*p == '?') {
        if (p[1] != ':') { r->why = "a (? group other than (?:"; return; }
        p += 2;
      }
      sb_puts(&r->out, "(");
      break;
    case '*': case '+': case '?': case '}':
      sb_printf(&r->out, "%c", c);
      if (*p == '?') p++;  /* lazy: the same set of full matches */
      break;
    case '\\': {
      char e = *p++;
      const char *item = class_item((char)(e | 0x20));
      if (!e) { r->why = "a trailing backslash"; return; }
      if (item) sb_printf(&r->out, "[%s%s]", e >= 'a' ? "" : "^", item);
      else if (e == 'b' || e == 'B') sb_printf(&r->out, "\\%c", e);  /* glibc's word boundary */
      else if (e == 'n') sb_puts(&r->out, "\n");
      else if (e == 't') sb_puts(&r->out, "\t");
      else if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
        r->why = "an escape other than \\w \\W \\d \\D \\s \\S \\b \\B \\n \\t";
        return;
      } else if (strchr(".[]()*+?{}|^$\\", e)) sb_printf(&r->out, "\\%c", e);
      else sb_printf(&r->out, "%c", e);
      break;
    }
    default: sb_printf(&r->out, "%c", c);
    }
  }
}

kiln_status str_regex_compile(const char *pattern, regex_t *re) {
  Rx r = { 0 };
  sb_puts(&r.out, "^(");
  rx_translate(&r, pattern);
  sb_puts(&r.out, ")$");
  if (r.out.failed) { sb_free(&r.out); return kiln_fail(KILN_ERR_NO_MEMORY, "regex: out of memory"); }
  if (r.why) {
    sb_free(&r.out);
    return kiln_fail(KILN_ERR_UNSUPPORTED, "regex '%s': %s is not supported", pattern, r.why);
  }
  int e = regcomp(re, r.out.s, REG_EXTENDED | REG_NOSUB);
  if (e) {
    char msg[128];
    regerror(e, re, msg, sizeof msg);
    sb_free(&r.out);
    return kiln_fail(KILN_ERR_INVALID_ARG, "regex '%s': %s", pattern, msg);
  }
  sb_free(&r.out);
  return KILN_OK;
}
