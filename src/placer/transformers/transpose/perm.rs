//! Permutation algebra of the TransposeOptimizer (`InvertPerm`, `ComposePerm`,
//! `UnsqueezePerm`, `SqueezePerm`, `SortedAxesForTransposedInput` in `transpose_optimizer.cc`).

pub(super) fn is_valid_perm(perm: &[i64]) -> bool {
    let r = perm.len();
    let mut used = vec![false; r];
    for &p in perm {
        match usize::try_from(p).ok().filter(|&p| p < r) {
            Some(p) if !used[p] => used[p] = true,
            _ => return false,
        }
    }
    true
}

pub(super) fn invert(perm: &[i64]) -> Vec<i64> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p as usize] = i as i64;
    }
    inv
}

/// `ComposePerm(p1, p2)`: `p1[p2[i]]`.
pub(super) fn compose(p1: &[i64], p2: &[i64]) -> Vec<i64> {
    p2.iter().map(|&p| p1[p as usize]).collect()
}

pub(super) fn is_identity(perm: &[i64]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| p == i as i64)
}

pub(super) fn normalize_axis(axis: i64, rank: usize) -> Option<i64> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a)
}

pub(super) fn normalize_axes(axes: &[i64], rank: usize) -> Option<Vec<i64>> {
    let mut used = vec![false; rank];
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let a = normalize_axis(a, rank)?;
        if used[a as usize] {
            return None;
        }
        used[a as usize] = true;
        out.push(a);
    }
    Some(out)
}

pub(super) fn unsqueeze_perm(axes: &[i64], perm: &[i64]) -> Vec<i64> {
    let new_rank = perm.len() + axes.len();
    let mut added = vec![false; new_rank];
    for &a in axes {
        added[a as usize] = true;
    }
    let map: Vec<i64> = (0..new_rank)
        .filter(|&i| !added[i])
        .map(|i| i as i64)
        .collect();
    let mut j = 0;
    (0..new_rank)
        .map(|i| {
            if added[i] {
                i as i64
            } else {
                let p = perm[j] as usize;
                j += 1;
                map[p]
            }
        })
        .collect()
}

pub(super) fn squeeze_perm(axes: &[i64], perm: &[i64]) -> Vec<i64> {
    let mut removed = vec![false; perm.len()];
    for &a in axes {
        removed[a as usize] = true;
    }
    let mut map = vec![0i64; perm.len()];
    let mut j = 0;
    for (i, m) in map.iter_mut().enumerate() {
        if !removed[i] {
            *m = j;
            j += 1;
        }
    }
    perm.iter()
        .filter(|&&p| !removed[p as usize])
        .map(|&p| map[p as usize])
        .collect()
}

pub(super) fn sorted_axes_for_transposed_input(axes: &[i64], perm: &[i64]) -> Vec<i64> {
    let mut include = vec![false; perm.len()];
    for &a in axes {
        include[perm[a as usize] as usize] = true;
    }
    (0..perm.len() as i64)
        .filter(|&a| include[a as usize])
        .collect()
}
