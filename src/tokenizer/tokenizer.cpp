#include "tokenizer/tokenizer.h"
