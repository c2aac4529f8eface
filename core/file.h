/* file.h -- whole files: mapped for reading, written in full (the tiers' saved indexes). */
#ifndef KVT_CORE_FILE_H
#define KVT_CORE_FILE_H
#include <stddef.h>
#include <stdint.h>

/*
 * Maps path read-only with its pages read in. A file longer than max_len is not mapped (it
 * would all be read).
 * @return : 0 and *data, *len (unmap with kvt_file_unmap); -ENOENT (no file), -EFBIG (longer
 * than max_len), -ENODATA (empty), or another -errno.
 */
int kvt_file_map(const char *path, size_t max_len, const uint8_t **data, size_t *len);
void kvt_file_unmap(const uint8_t *data, size_t len);

/* Writes len bytes at fd's offset, through EINTR and short writes. @return : 0 or -errno. */
int kvt_file_write_all(int fd, const void *buf, size_t len);
#endif
