/*
 * safetensors.h - reading and writing tensor files in the safetensors format,
 * the format of every golden case, every case file `make verify` draws and
 * every model checkpoint. The layout (an 8-byte header length, a JSON
 * header, the data section) and every check the reader makes are in the
 * chapter's README.
 *
 * The reader trusts nothing: a file that breaks a rule of the format is
 * refused with one line in err naming the file and the problem, and
 * nothing is leaked. The writer replaces the destination atomically
 * (file_write_atomic below), so a crash never leaves a half-written file.
 *
 * This code assumes a little-endian host (x86-64, ARM64).
 *
 * Read next: cases/casefile.h (how a chapter program reads a case), then
 * chapter 01.
 */
#ifndef SAFETENSORS_H
#define SAFETENSORS_H

#include <stdio.h>

#include "tensor.h"

/* safetensors' own limit on the JSON header. */
#define SAFETENSORS_MAX_HEADER (100u * 1000u * 1000u)

/* The writer puts the CRC-32 of each tensor's data in the metadata, as
 * "crc32.NAME": "8 hex digits" (PyTorch's loader ignores metadata; the
 * reference's save_checkpoint writes them too). The reader checks each one
 * it finds and refuses a file whose data does not match, naming the tensor:
 * a flipped bit no longer loads as a wrong model. A file without them (an
 * older one, a golden case) loads unchecked. The reader drops them from
 * the metadata it returns. */
#define SAFETENSORS_CHECKSUM "crc32."

typedef struct {
    char *name;
    Tensor tensor;
} NamedTensor;

/* The contents of one safetensors file: named tensors plus string metadata. */
typedef struct {
    char *path;              /* the file it was read from, for error messages */
    int n_tensors;
    NamedTensor *tensors;
    int n_meta;
    char **meta_keys;
    char **meta_values;
} TensorFile;

int safetensors_read(const char *path, TensorFile *file, Error *err);
int safetensors_write(const char *path, const TensorFile *file, Error *err);
/* The CRC-32 (zlib's) of a tensor's data, as the metadata holds it. */
uint32_t safetensors_crc32(const Tensor *t);

/* Writes the parts, one after another, as the file at path: to a temporary
 * file beside it, flushed to the disk (fsync), then renamed into place. The
 * new file's permissions follow the umask; a symbolic link is followed (the
 * file it names is replaced); a path that exists and is not a regular file
 * (a FIFO, a device) is refused, never replaced. The one writer of every
 * file the project rewrites, the loss log's too. */
typedef struct {
    const void *data;
    size_t size;
} FilePart;
int file_write_atomic(const char *path, const FilePart *parts, int n_parts, Error *err);

/* Removes the temporary files (target.tmp.XXXXXX) that writes to target
 * killed before their rename left behind; a write still under way keeps
 * its own (it holds a lock on it). file_write_atomic does this first. */
void file_remove_stale_temps(const char *target);

/* A text file (plot data, a copied log) written whole or not at all:
 * text_out_open gives a stream `f` that collects the text in memory, and
 * text_out_commit writes it with file_write_atomic and frees it. On an
 * error path, text_out_discard frees it and writes nothing. */
typedef struct {
    FILE *f;
    char *text;
    size_t len;
} TextOut;
int text_out_open(TextOut *out, Error *err);
int text_out_commit(TextOut *out, const char *path, Error *err);
void text_out_discard(TextOut *out);
void tensorfile_free(TensorFile *file);

/* The tensor called `name`, or NULL. */
const Tensor *tensorfile_find(const TensorFile *file, const char *name);

/* Like tensorfile_find, but a missing tensor, another dtype or (when ndim >= 0)
 * another rank is an error that names the file and the tensor. */
int tensorfile_get(const TensorFile *file, const char *name, DType dtype, int ndim,
                   const Tensor **out, Error *err);

/* Adds a tensor (replacing one of the same name). The file takes ownership of
 * tensor->data and the caller's Tensor is emptied. */
int tensorfile_add(TensorFile *file, const char *name, Tensor *tensor, Error *err);

/* Adds a copy of `data` as a float32 tensor of the given shape. */
int tensorfile_add_f32(TensorFile *file, const char *name, const float *data,
                       int ndim, const int64_t *shape, Error *err);

/* Metadata: the value for `key`, or NULL. */
const char *tensorfile_meta(const TensorFile *file, const char *key);
int tensorfile_set_meta(TensorFile *file, const char *key, const char *value, Error *err);

/* Typed metadata. A missing key gives `fallback`; a value that does not parse
 * is an error naming the file and the key. Booleans are "true" or "false". */
int tensorfile_meta_double(const TensorFile *file, const char *key, double fallback,
                           double *out, Error *err);
int tensorfile_meta_int(const TensorFile *file, const char *key, long long fallback,
                        long long *out, Error *err);
int tensorfile_meta_bool(const TensorFile *file, const char *key, int fallback,
                         int *out, Error *err);

#endif
