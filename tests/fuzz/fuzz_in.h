/* SPDX-License-Identifier: MIT */
/* The structure-aware fuzz targets' input reader (fuzz_tcp.c, fuzz_udp.c). */
#ifndef SRN_FUZZ_IN_H
#define SRN_FUZZ_IN_H

#include <stddef.h>
#include <stdint.h>

/* Reads the input a byte at a time; zeros once it runs out. */
struct in {
	const uint8_t *p;
	size_t n;
};

static inline uint32_t take(struct in *in, unsigned bytes)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < bytes; i++) {
		v = v << 8 | (in->n ? *in->p : 0);
		if (in->n) {
			in->p++;
			in->n--;
		}
	}
	return v;
}

#endif /* SRN_FUZZ_IN_H */
