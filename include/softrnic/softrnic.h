/* SPDX-License-Identifier: MIT */
/*
 * softrnic's own extensions to the verbs API.
 *
 * softrnic implements the standard verbs API: a program includes
 * <infiniband/verbs.h> (Debian's libibverbs-dev) and links with -libverbs;
 * `pkg-config --cflags --libs softrnic` links it with softrnic's private
 * libibverbs.so.1, so that it runs on softrnic0 without `softrnic exec`.
 *
 * Anything softrnic offers beyond the verbs API is declared here or in a
 * header included here, and only once it is implemented: the version of
 * softrnic this header belongs to, at compile time, and direct access to
 * a same-host peer's memory through a pointer (<softrnic/direct.h>).
 */
#ifndef SOFTRNIC_SOFTRNIC_H
#define SOFTRNIC_SOFTRNIC_H

#include <softrnic/direct.h>
#include <softrnic/version.h>

#endif /* SOFTRNIC_SOFTRNIC_H */
