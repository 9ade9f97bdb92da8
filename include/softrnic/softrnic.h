/* SPDX-License-Identifier: MIT */
/*
 * softrnic's own extensions to the verbs API.
 *
 * softrnic implements the standard verbs API: a program includes
 * <infiniband/verbs.h> (Debian's libibverbs-dev) and links with -libverbs;
 * `pkg-config --cflags --libs softrnic` links it with softrnic's private
 * libibverbs.so.1, so that it runs on softrnic0 without `softrnic exec`.
 *
 * Anything softrnic offers beyond the verbs API is declared here, and only
 * once it is implemented. Today that is the version of softrnic this
 * header belongs to, at compile time.
 */
#ifndef SOFTRNIC_SOFTRNIC_H
#define SOFTRNIC_SOFTRNIC_H

#include <softrnic/version.h>

#endif /* SOFTRNIC_SOFTRNIC_H */
