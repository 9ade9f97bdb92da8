// SPDX-License-Identifier: MIT
/*
 * softrnic — XRC domains and the process's XRC SRQs.
 *
 * ibv_open_xrcd with a file descriptor names a domain by the file's inode:
 * every open of the same file in this process shares it (O_CREAT creates
 * it if absent, O_EXCL refuses an existing one); fd -1 with O_CREAT makes
 * a private one. A domain is an id compared by the responder: an XRC SRQ
 * takes a message of a TGT QP only if both have the same domain. Domains
 * are per process: a TGT QP and the SRQs it feeds live in one process.
 *
 * XRC SRQs are listed here by their number (host-unique, reserved by the
 * control plane) so that a request naming one finds it. The list, the
 * domains and TGT QPs' open counts share srn_xrc_lock, a leaf lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/core.h"

struct srn_xrcd_dom {
	struct srn_list link;
	bool has_inode;
	dev_t dev;
	ino_t ino;
	uint32_t id;
	unsigned opens;
};

pthread_mutex_t srn_xrc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srn_list srn_xrcd_doms = SRN_LIST_INIT(srn_xrcd_doms);
static struct srn_list srn_xrc_srqs = SRN_LIST_INIT(srn_xrc_srqs);
static uint32_t srn_xrcd_next_id = 1;

/* The domain of (dev, ino), or NULL. srn_xrc_lock held. */
static struct srn_xrcd_dom *srn_xrcd_dom_find(dev_t dev, ino_t ino)
{
	struct srn_list *pos;

	srn_list_for_each(pos, &srn_xrcd_doms) {
		struct srn_xrcd_dom *d =
			srn_list_entry(pos, struct srn_xrcd_dom, link);

		if (d->has_inode && d->dev == dev && d->ino == ino)
			return d;
	}
	return NULL;
}

/* Finds or creates the domain the open names. srn_xrc_lock held. */
static int srn_xrcd_dom_get(int fd, int oflags, struct srn_xrcd_dom **dom_p)
{
	struct srn_xrcd_dom *d = NULL;
	struct stat st;

	if (fd != -1) {
		if (fstat(fd, &st))
			return -errno;
		d = srn_xrcd_dom_find(st.st_dev, st.st_ino);
	}
	if (d && (oflags & O_EXCL))
		return -EINVAL; /* as the kernel: it exists */
	if (!d && !(oflags & O_CREAT))
		return -EINVAL;
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d)
			return -ENOMEM;
		d->has_inode = fd != -1;
		if (d->has_inode) {
			d->dev = st.st_dev;
			d->ino = st.st_ino;
		}
		d->id = srn_xrcd_next_id++;
		srn_list_add_tail(&d->link, &srn_xrcd_doms);
	}
	d->opens++;
	*dom_p = d;
	return 0;
}

struct ibv_xrcd *srn_open_xrcd(struct ibv_context *context,
			       struct ibv_xrcd_init_attr *attr)
{
	const uint32_t need = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	struct srn_xrcd *x = NULL;
	int err = -EINVAL;

	if (attr && attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED)
		err = -EOPNOTSUPP;
	else if (attr && (attr->comp_mask & need) == need &&
		 !(attr->oflags & ~(O_CREAT | O_EXCL)))
		err = 0;
	if (!err) {
		x = calloc(1, sizeof(*x));
		err = x ? 0 : -ENOMEM;
	}
	if (!err) {
		pthread_mutex_lock(&srn_xrc_lock);
		err = srn_xrcd_dom_get(attr->fd, attr->oflags, &x->dom);
		pthread_mutex_unlock(&srn_xrc_lock);
	}
	if (err) {
		free(x);
		errno = -err;
		return NULL;
	}
	x->ibxrcd.context = context;
	return &x->ibxrcd;
}

int srn_close_xrcd(struct ibv_xrcd *ibxrcd)
{
	struct srn_xrcd *x = to_sxrcd(ibxrcd);

	/* acquire: pairs with the release of refs in srn_srq_destroy and
	 * srn_qp_get_refs (the SRQs' and TGT QPs' puts) */
	if (atomic_load_explicit(&x->refs, memory_order_acquire))
		return EBUSY;
	pthread_mutex_lock(&srn_xrc_lock);
	if (!--x->dom->opens) {
		srn_list_del(&x->dom->link);
		free(x->dom);
	}
	pthread_mutex_unlock(&srn_xrc_lock);
	free(x);
	return 0;
}

uint32_t srn_xrcd_id(const struct srn_xrcd *x)
{
	return x ? x->dom->id : 0;
}

/* The SRQ has its number: requests may name it from now on. */
void srn_srq_xrc_publish(struct srn_srq *srq, uint32_t srqn, int srqn_fd)
{
	srq->srqn = srqn;
	srq->srqn_fd = srqn_fd;
	pthread_mutex_lock(&srn_xrc_lock);
	srn_list_add_tail(&srq->xrc_link, &srn_xrc_srqs);
	pthread_mutex_unlock(&srn_xrc_lock);
}

/* The XRC SRQ numbered srqn in this process, or NULL. The caller keeps it
 * from being destroyed meanwhile (the progress lock, which
 * ibv_destroy_srq takes to unlink it). */
struct srn_srq *srn_srq_xrc_find(uint32_t srqn)
{
	struct srn_srq *found = NULL;
	struct srn_list *pos;

	pthread_mutex_lock(&srn_xrc_lock);
	srn_list_for_each(pos, &srn_xrc_srqs) {
		struct srn_srq *s =
			srn_list_entry(pos, struct srn_srq, xrc_link);

		if (s->srqn == srqn) {
			found = s;
			break;
		}
	}
	pthread_mutex_unlock(&srn_xrc_lock);
	return found;
}

/* The XRC SRQ a request of a TGT QP of domain xrcd_id names: -ENOENT
 * (none here), -EPERM (another domain's). */
int srn_srq_xrc_lookup(uint32_t srqn, uint32_t xrcd_id, struct srn_srq **srq_p)
{
	struct srn_srq *s = srn_srq_xrc_find(srqn);

	if (!s)
		return -ENOENT;
	if (srn_xrcd_id(s->xrcd) != xrcd_id)
		return -EPERM;
	*srq_p = s;
	return 0;
}
