// SPDX-License-Identifier: MIT
/*
 * A verbs program built against an installed softrnic with
 *   cc hello_softrnic.c $(pkg-config --cflags --libs softrnic)
 * and run with no LD_LIBRARY_PATH and no softrnic exec: it must find
 * softrnic0 through the private library that softrnic.pc linked it with.
 * Prints the version of the headers and the devices; exits 0 when
 * softrnic0 is among them and opens.
 */
#include <infiniband/verbs.h>
#include <softrnic/softrnic.h>
#include <stdio.h>
#include <string.h>

#if SOFTRNIC_VERSION_NUMBER < SOFTRNIC_VERSION_OF(0, 1, 0)
#error "softrnic/version.h: unexpected version"
#endif

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	int i, n = 0, rc = 1;

	printf("softrnic headers %s\n", SOFTRNIC_VERSION);
	list = ibv_get_device_list(&n);
	if (!list) {
		perror("ibv_get_device_list");
		return 1;
	}
	for (i = 0; i < n; i++) {
		printf("device %s\n", ibv_get_device_name(list[i]));
		if (strcmp(ibv_get_device_name(list[i]), "softrnic0"))
			continue;
		ctx = ibv_open_device(list[i]);
		if (!ctx) {
			perror("ibv_open_device softrnic0");
			continue;
		}
		ibv_close_device(ctx);
		rc = 0;
	}
	ibv_free_device_list(list);
	if (rc)
		fprintf(stderr, "hello_softrnic: softrnic0 not found\n");
	return rc;
}
