"""A short tour of the algebra: ``python -m layoutalg``."""

from layoutalg import (
    Layout, Swizzle, complement, composition, logical_divide, logical_product, print_layout,
    raked_product, tile_to_shape, zipped_divide,
)


def main():
    A = Layout((6, 2), (8, 2))
    B = Layout((4, 3), (3, 1))
    print(f"composition({A}, {B}) = {composition(A, B)}")
    print(f"complement(4:2, 24) = {complement(Layout(4, 2), 24)}")
    print(f"logical_divide((4,2,3):(2,1,8), 4:2) = {logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2))}")
    print(f"logical_product((2,2):(4,1), 6) = {logical_product(Layout((2, 2), (4, 1)), 6)}")
    print(f"zipped_divide((128,64), (32,8)) = {zipped_divide(Layout((128, 64)), (32, 8))}")
    smem = tile_to_shape(composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1))), (128, 64))
    print(f"swizzled shared-memory tile: {smem}")
    print("raked_product((2,2), (2,3)):")
    print_layout(raked_product(Layout((2, 2)), Layout((2, 3))))


if __name__ == "__main__":
    main()
