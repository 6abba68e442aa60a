/*
 * dist.c — kiln_dist, the communicator a program's collectives run over. Takes an id and a
 * rank, hands on NCCL's communicator (cuda/nccl.c) or, for a group of one rank without an id,
 * nothing at all: the schedule then copies each collective's operand (the mean over one rank).
 */
#include "runtime.h"

#include <string.h>

kiln_status kiln_dist_id_new(kiln_dist_id *out) {
  if (!out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_dist_id_new: out is NULL");
  return rt_nccl_id(out->bytes);
}

kiln_status kiln_dist_id_format(const kiln_dist_id *id, char *text, size_t cap) {
  if (!id || !text || cap < KILN_DIST_ID_TEXT)
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_dist_id_format: need an id and %d bytes of text (got %zu)",
                     KILN_DIST_ID_TEXT, text ? cap : 0);
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < KILN_DIST_ID_BYTES; i++) text[2 * i] = hex[id->bytes[i] >> 4], text[2 * i + 1] = hex[id->bytes[i] & 15];
  text[2 * KILN_DIST_ID_BYTES] = 0;
  return KILN_OK;
}

static int hex_digit(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

kiln_status kiln_dist_id_parse(const char *text, kiln_dist_id *out) {
  if (!text || !out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_dist_id_parse: text or out is NULL");
  size_t n = strnlen(text, KILN_DIST_ID_TEXT);
  if (n != 2 * KILN_DIST_ID_BYTES)
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_dist_id_parse: an id is %d hex digits, not %s%zu", 2 * KILN_DIST_ID_BYTES,
                     n == KILN_DIST_ID_TEXT ? "more than " : "", n == KILN_DIST_ID_TEXT ? n - 1 : n);
  for (int i = 0; i < KILN_DIST_ID_BYTES; i++) {
    int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_dist_id_parse: character %d is not a hex digit", hi < 0 ? 2 * i : 2 * i + 1);
    out->bytes[i] = (unsigned char)(hi << 4 | lo);
  }
  return KILN_OK;
}

kiln_status kiln_dist_open(const kiln_dist_id *id, int ranks, int rank, kiln_dist **out) {
  if (!out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_dist_open: out is NULL");
  *out = NULL;
  if (ranks < 1 || rank < 0 || rank >= ranks)
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_dist_open: rank %d of %d ranks (need 0 <= rank < ranks)", rank, ranks);
  if (!id && ranks > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_dist_open: %d ranks need the communicator's id (kiln_dist_id_new)", ranks);
  kiln_dist *d = kiln_calloc(1, sizeof *d);
  if (!d) return kiln_fail(KILN_ERR_NO_MEMORY, "kiln_dist_open: out of memory");
  d->ranks = ranks, d->rank = rank;
  kiln_status st = id ? rt_nccl_open(id->bytes, ranks, rank, &d->comm) : KILN_OK;
  if (st) {
    kiln_free(d);
    kiln_error_prefix("kiln_dist_open (rank %d of %d): ", rank, ranks);
    return st;
  }
  *out = d;
  return KILN_OK;
}

int kiln_dist_ranks(const kiln_dist *d) { return d ? d->ranks : 1; }
int kiln_dist_rank(const kiln_dist *d) { return d ? d->rank : 0; }

void kiln_dist_close(kiln_dist *d) {
  if (!d) return;
  rt_nccl_close(d->comm);
  kiln_free(d);
}
