/* SPDX-License-Identifier: MIT */
/* softrnic — a minimal intrusive doubly linked list. */
#ifndef SRN_LIST_H
#define SRN_LIST_H

#include <stdbool.h>
#include "util/srn_compiler.h"

struct srn_list {
	struct srn_list *next, *prev;
};

#define SRN_LIST_INIT(name)      \
	{                        \
		&(name), &(name) \
	}

static inline void srn_list_init(struct srn_list *l)
{
	l->next = l;
	l->prev = l;
}

static inline bool srn_list_empty(const struct srn_list *l)
{
	return l->next == l;
}

static inline void srn_list_add(struct srn_list *n, struct srn_list *h)
{
	n->next = h->next;
	n->prev = h;
	h->next->prev = n;
	h->next = n;
}

static inline void srn_list_add_tail(struct srn_list *n, struct srn_list *h)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void srn_list_del(struct srn_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	srn_list_init(n);
}

#define srn_list_entry(ptr, type, member) container_of(ptr, type, member)

#define srn_list_for_each(pos, head) \
	for (pos = (head)->next; pos != (head); pos = pos->next)

#define srn_list_for_each_safe(pos, tmp, head)                   \
	for (pos = (head)->next, tmp = pos->next; pos != (head); \
	     pos = tmp, tmp = pos->next)

#endif /* SRN_LIST_H */
