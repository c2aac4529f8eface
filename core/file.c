/* file.c -- whole files: mapped for reading, written in full. */
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int kvt_file_map(const char *path, size_t max_len, const uint8_t **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	int rc = fstat(fd, &st) ? -errno : 0;
	if (!rc && (uint64_t)st.st_size > max_len)
		rc = -EFBIG;
	else if (!rc && !st.st_size)
		rc = -ENODATA;
	void *m = MAP_FAILED;
	if (!rc && (m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd,
	                     0)) == MAP_FAILED)
		rc = -errno;
	close(fd);
	if (rc)
		return rc;
	*data = m;
	*len = (size_t)st.st_size;
	return 0;
}

void kvt_file_unmap(const uint8_t *data, size_t len)
{
	if (data)
		munmap((void *)data, len);
}

int kvt_file_write_all(int fd, const void *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t w = write(fd, (const uint8_t *)buf + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		done += (size_t)w;
	}
	return 0;
}
