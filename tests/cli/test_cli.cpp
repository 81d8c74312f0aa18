#include "test_util.h"
TEST(Cli, Placeholder) {}
